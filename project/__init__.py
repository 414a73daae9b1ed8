"""This repository's Django project: settings, URLs and WSGI entry for the console and the workers. It is not
part of the installable package (jobconsole and dashboards are the apps another project installs)."""
