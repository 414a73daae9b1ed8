"""The example tasks of `make run`'s demo, registered the way any installed app registers its own tasks, and one
task of Django's own task framework (TASKS in project/settings.py points it at Jobconsole)."""

from django.tasks import task

from jobconsole import examples  # noqa: F401  (importing it registers the tasks)


@task
def send_receipt(order_id: int, *, email: str = "") -> str:
    """Try it beside `make run`: `manage.py shell -c "from project.tasks import send_receipt as t;
    print(t.enqueue(7, email='ana@example.com').id)"`, then look the job up in the console."""
    return f"receipt for order {order_id} sent to {email or 'the customer'}"
