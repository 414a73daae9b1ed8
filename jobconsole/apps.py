import sys
from importlib import import_module

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class JobconsoleConfig(AppConfig):
    name = "jobconsole"
    verbose_name = "Jobconsole"

    def ready(self) -> None:
        from jobconsole import checks  # noqa: F401  (registers the settings checks)
        from jobconsole.conf import get_config, problems

        # With broken settings, leave the tasks alone: `manage.py check` then reports every problem
        # (jobconsole.E00x), and anything that reads the settings raises ImproperlyConfigured.
        if problems():
            return
        # Importing a task module registers its tasks with the engine's default registry: each installed
        # app's tasks.py, then the modules named in TASK_MODULES.
        autodiscover_modules("tasks")
        for module in get_config()["TASK_MODULES"]:
            import_module(module)
        # Celery-style tasks declared while the settings were being imported (proj/celery.py) and
        # app.autodiscover_tasks() calls made then: now that the settings can be read.
        if "jobconsole.celery" in sys.modules:
            sys.modules["jobconsole.celery"].finalize()
