"""The database mirror (Django side): `loop.Mirror` applies the events streams to the models;
`loop.build_mirror()` configures it from settings. See `jobconsole.mirror.loop` for how it stays exact."""
