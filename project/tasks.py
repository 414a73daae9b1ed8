"""The example tasks of `make run`'s demo, registered the way any installed app registers its own tasks."""

from jobconsole import examples  # noqa: F401  (importing it registers the tasks)
