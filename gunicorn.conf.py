"""gunicorn's settings for every way the project starts it (the Procfile, scripts/run_stack.py): gunicorn reads
./gunicorn.conf.py from the directory it starts in.

The request line may be as long as gunicorn allows (8,190 bytes; its default is 4,094): the API refuses a path and
query string over 8,000 bytes itself, as problem+json (jobconsole_api/v1/routing.py), so gunicorn's HTML 414 is
left for lines no client of ours sends."""

limit_request_line = 8190
