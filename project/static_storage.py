"""This repository's static files storage: WhiteNoise's hashed, compressed copies, named by their hashed names
whatever DEBUG is.

Django names static files by their hashed names only with DEBUG off. `make run` runs with DEBUG on (and
collectstatic at every start), so its pages named `console.css` unhashed and WhiteNoise served it uncompressed
with `max-age=0`: every page load asked again for each script and style sheet. Here a collected file goes by its
hashed name with DEBUG on too, and WhiteNoise serves it as in production: gzipped, cached for years, immutable.
A file collectstatic has not seen yet (added since the last start) keeps its plain name, found in its app's
folder as before."""

from django.conf import settings
from whitenoise.storage import CompressedManifestStaticFilesStorage


class CollectedStaticFilesStorage(CompressedManifestStaticFilesStorage):  # type: ignore[misc]  # untyped
    def url(self, name: str | None, force: bool = False) -> str:
        if settings.DEBUG and not force and name:
            try:
                return str(super().url(name, force=True))  # force: the hashed name, which DEBUG would skip
            except ValueError:  # not in the manifest (or no manifest yet)
                pass
        return str(super().url(name, force))
