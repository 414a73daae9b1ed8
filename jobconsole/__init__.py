"""Jobconsole: the Django project, and the Django layer over the queue engine in `jobconsole.core`."""
