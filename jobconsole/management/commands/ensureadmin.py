"""python manage.py ensureadmin: create the `admin` superuser if there is none, printing its password once."""

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create an 'admin' superuser with a random password when no superuser exists (prints it once)."

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "admin@localhost", password)  # only the hash is stored
        banner = f"Admin account created -- user: admin  password: {password}  (shown once; keep it)"
        self.stdout.write("\n" + "=" * len(banner) + "\n" + banner + "\n" + "=" * len(banner) + "\n")
