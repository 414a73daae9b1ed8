"""Where the mirror stands in each queue's events stream: shared by the reader, the writer and resync."""

from django.db.models import F

from jobconsole.core.streams import StreamId, format_id, parse_id
from jobconsole.models import MirrorCursor

NONE: StreamId = (0, 0)  # nothing applied yet


class Cursors:
    def __init__(self) -> None:
        # The last entry applied, per queue: committed with the rows (MirrorCursor) so a new leader starts there.
        self.applied: dict[str, StreamId] = {}
        # The stream's last id when last read or resynced, per queue: what an idle mirror waits past.
        self.seen: dict[str, str] = {}

    def get(self, queue: str) -> StreamId:
        return self.applied.get(queue, NONE)

    def load(self) -> None:
        """Start from what the database committed (a new leader)."""
        self.applied = {q: parse_id(i) for q, i in MirrorCursor.objects.values_list("queue", "last_id")}

    def save(self, queue: str, top: StreamId, events: int) -> None:
        """Record a batch's newest entry of the queue, in the batch's transaction."""
        last_id = format_id(max(self.get(queue), top))
        if not MirrorCursor.objects.filter(queue=queue).update(last_id=last_id, events=F("events") + events):
            MirrorCursor.objects.create(queue=queue, last_id=last_id, events=events)

    def advance(self, queue: str, top: StreamId) -> None:
        """The batch that `save` recorded has committed."""
        self.applied[queue] = max(self.get(queue), top)

    def reset(self, queue: str, upto: str) -> None:
        """Record a resync's stream position, in its transaction."""
        MirrorCursor.objects.update_or_create(queue=queue, defaults={"last_id": upto})

    def resynced(self, queue: str, upto: str) -> None:
        """The resync that `reset` recorded has committed, and the queue's group reads after `upto`."""
        self.applied[queue] = parse_id(upto)
        self.seen[queue] = upto
