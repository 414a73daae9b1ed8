from importlib import import_module

from django.apps import AppConfig


class JobconsoleConfig(AppConfig):
    name = "jobconsole"
    verbose_name = "Jobconsole"

    def ready(self) -> None:
        from jobconsole.conf import get_config

        # Importing a task module registers its tasks with the engine's default registry.
        for module in get_config()["TASK_MODULES"]:
            import_module(module)
