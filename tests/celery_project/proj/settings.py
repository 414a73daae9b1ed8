"""Jobconsole's project settings plus the shop app and the CELERY_* settings a Celery project has."""

from project.settings import *  # noqa: F403
from project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "shop"]

CELERY_BROKER_URL = "redis://localhost:6379/0"  # ignored (logged once): Jobconsole uses JOBCONSOLE's REDIS_URL
CELERY_RESULT_BACKEND = "redis://localhost:6379/1"  # ignored (logged once)
CELERY_ACCEPT_CONTENT = ["json"]  # what Jobconsole does: read silently
CELERY_TASK_SERIALIZER = "json"
CELERY_TIMEZONE = "Europe/Paris"  # naive etas are read in it
CELERY_TASK_DEFAULT_QUEUE = "proj"
CELERY_TASK_ROUTES = {"shop.tasks.slow_*": {"queue": "proj-slow"}}
CELERY_TASK_SOFT_TIME_LIMIT = 30  # ignored (logged once)
