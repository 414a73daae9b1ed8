from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "jobconsole_api"
    verbose_name = "API"
    default_auto_field = "django.db.models.BigAutoField"
