from django.apps import AppConfig

from project import var_dir


class ProjectConfig(AppConfig):
    name = "project"

    def ready(self) -> None:
        var_dir.report()  # what the settings tightened in var/, now that logging is set up
