"""The database mirror (Django side): `loop.Mirror` applies the events streams to the models (see
`jobconsole.mirror.loop` for how it stays exact, and for its parts); `service.build_service()` configures it
from settings, with the chores of its leader."""
