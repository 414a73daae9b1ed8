"""`manage.py apitoken create --name X --scope read|submit|operate [--queue Q]... [--task T]...` (prints the token
once), `list`, `revoke PREFIX`."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from jobconsole_api.models import SCOPES, ApiToken


class Command(BaseCommand):
    help = "Create, list and revoke API tokens. A new token is printed once; only its hash is stored."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        create = actions.add_parser("create", help="issue a token and print it (once)")
        create.add_argument("--name", required=True, help="who or what uses it")
        create.add_argument(
            "--scope", choices=SCOPES, default="submit",
            help="read (dashboards: reads everything, changes nothing), submit (default: submits jobs and handles "
            "its own) or operate (everything)",
        )  # fmt: skip
        create.add_argument("--queue", action="append", default=[], dest="queues", metavar="QUEUE",
                            help="limit the token to this queue (repeat for more; none: every queue)")  # fmt: skip
        create.add_argument("--task", action="append", default=[], dest="tasks", metavar="TASK",
                            help="limit the token to this task (repeat for more; none: every task)")  # fmt: skip
        actions.add_parser("list", help="every token: prefix, name, scope, limits, state")
        revoke = actions.add_parser("revoke", help="revoke a token by its prefix (as `list` shows it)")
        revoke.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            name = options["name"].strip()
            if not name:
                raise CommandError("--name must not be empty")
            try:
                token, plain = ApiToken.objects.issue(
                    name, options["scope"], queues=options["queues"], tasks=options["tasks"]
                )
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            limits = _limits(token)
            self.stderr.write(f"Created {token.scope} token {token.name!r}{limits}; it is shown only this once:")
            self.stdout.write(plain)
        elif action == "list":
            for token in ApiToken.objects.order_by("created_at"):
                state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
                self.stdout.write(f"{token.prefix}  {token.scope:<8} {state:<24} {token.name}{_limits(token)}")
        else:
            matches = list(ApiToken.objects.filter(prefix=options["prefix"], revoked_at=None))
            if len(matches) != 1:
                raise CommandError(f"{len(matches)} active tokens have the prefix {options['prefix']!r}; need one")
            matches[0].revoked_at = timezone.now()
            matches[0].save(update_fields=["revoked_at"])
            self.stdout.write(f"Revoked {matches[0]}")


def _limits(token: ApiToken) -> str:
    parts = [
        f"{what} {', '.join(names)}" for what, names in (("queues", token.queues), ("tasks", token.tasks)) if names
    ]
    return f" (only {'; '.join(parts)})" if parts else ""
