"""A workflow's graph laid out for a server-rendered SVG: topological layers left to right, parents before their
children, fan-outs collapsed.

Jobs whose step names differ only by a trailing number (`export.0` ... `export.499`, `chord.header.9`) and that
sit in the same layer are one node when there are `COLLAPSE` or more of them, with their counts by state; the
links between two nodes are one edge with how many links it stands for. A layer shows at most `MAX_PER_LAYER`
nodes, the rest as one "more" node. Within a layer, nodes follow their parents' order (barycentres), which keeps
crossings few for the shapes workflows have (chains, fan-out and fan-in, diamonds). No I/O.
"""

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

from jobconsole.core.states import STATES, JobState
from jobconsole.step_names import base, natural

COLLAPSE = 4
MAX_PER_LAYER = 40
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 206, 54, 96, 18, 16
# A bar reads left to right: done, running, not run yet, then what did not complete.
_ORDER = {
    state.value: (0 if info.terminal and not info.resubmittable else 1 if not info.terminal and not info.waiting
                  else 2 if info.waiting else 3, info.place)
    for state, info in STATES.items()
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Member:
    id: str
    step: str
    state: str
    task: str


@dataclass(slots=True)
class Segment:
    state: str
    count: int
    tone: str
    pending: bool  # not run yet: drawn in the soft colour
    x: float = 0.0
    width: float = 0.0


@dataclass(slots=True)
class Node:
    key: str
    label: str
    layer: int
    members: list[Member] = field(default_factory=list)
    more: bool = False  # the rest of a layer too long to draw
    x: float = 0.0
    y: float = 0.0
    order: float = 0.0
    segments: list[Segment] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def single(self) -> Member | None:
        return self.members[0] if len(self.members) == 1 and not self.more else None

    @property
    def tone(self) -> str:
        """The node's colour: its job's state's; for a group, failures first, then running, then the rest."""
        states = [m.state for m in self.members]
        tones = {_tone(s) for s in states}
        if "bad" in tones:
            return "bad"
        if any(_tone(s) == "info" and not _pending(s) for s in states):
            return "info"  # running
        if tones == {"ok"}:
            return "ok"
        if any(_tone(s) == "warn" and not _pending(s) for s in states):
            return "warn"  # cancelled
        pending = [s for s in states if _pending(s)]
        return _tone(pending[0]) if pending and len(pending) == len(states) else "info"

    @property
    def mark(self) -> str:
        """The state's sign (never colour alone), for a node of one job."""
        one = self.single
        if one is None or one.state not in JobState._value2member_map_:
            return ""
        return STATES[JobState(one.state)].mark

    @property
    def pending(self) -> bool:
        return all(_pending(m.state) for m in self.members)

    @property
    def summary(self) -> str:
        return " · ".join(f"{s.count:,} {s.state}" for s in self.segments)


@dataclass(frozen=True, slots=True)
class Edge:
    source: Node
    target: Node
    count: int

    @property
    def path(self) -> str:
        x1, y1 = self.source.x + NODE_W, self.source.y + NODE_H / 2
        x2, y2 = self.target.x - 6, self.target.y + NODE_H / 2
        mid = (x1 + x2) / 2
        return f"M{x1:.0f},{y1:.0f} C{mid:.0f},{y1:.0f} {mid:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"

    @property
    def label_x(self) -> float:
        return (self.source.x + NODE_W + self.target.x) / 2

    @property
    def label_y(self) -> float:
        return (self.source.y + self.target.y) / 2 + NODE_H / 2 - 4


@dataclass(frozen=True, slots=True)
class Layout:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    collapsed: int  # how many nodes stand for more than one job
    layer_of: dict[str, int]  # job id -> its layer
    node_w: int = NODE_W
    node_h: int = NODE_H


@cache
def _tone(state: str) -> str:
    info = STATES.get(JobState(state)) if state in JobState._value2member_map_ else None
    return info.tone if info else "idle"


@cache
def _pending(state: str) -> bool:
    info = STATES.get(JobState(state)) if state in JobState._value2member_map_ else None
    return bool(info and info.waiting)


def layers(members: Sequence[Member], links: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Each job's layer: the length of the longest chain of parents above it (Kahn's order; a job in a cycle,
    which the engine refuses, or whose parents are not all known, is put after the ones it waits for)."""
    ids = {m.id for m in members}
    children: dict[str, list[str]] = defaultdict(list)
    indegree = dict.fromkeys(ids, 0)
    for parent, child in links:
        if parent in ids and child in ids:
            children[parent].append(child)
            indegree[child] += 1
    layer = dict.fromkeys(ids, 0)
    todo = deque(i for i, n in indegree.items() if n == 0)
    while todo:
        job = todo.popleft()
        for child in children[job]:
            layer[child] = max(layer[child], layer[job] + 1)
            indegree[child] -= 1
            if indegree[child] == 0:
                todo.append(child)
    return layer


def layout(members: Sequence[Member], links: Sequence[tuple[str, str]]) -> Layout:
    """Nodes with their positions, and edges, for `members` (a workflow's jobs) and `links` (parent, child)."""
    layer_of = layers(members, links)
    groups: dict[tuple[int, str], list[Member]] = defaultdict(list)
    for m in members:
        groups[(layer_of[m.id], base(m.step))].append(m)
    node_of: dict[str, Node] = {}
    by_layer: dict[int, list[Node]] = defaultdict(list)
    for (layer, name), group in sorted(groups.items(), key=lambda kv: (kv[0][0], natural(kv[0][1]))):
        if len(group) >= COLLAPSE:
            nodes = [Node(f"{layer}:{name}", name, layer, group)]
        else:
            nodes = [Node(m.id, m.step or m.id, layer, [m]) for m in sorted(group, key=lambda m: natural(m.step))]
        for node in nodes:
            by_layer[layer].append(node)
            for m in node.members:
                node_of[m.id] = node
    parents_of: dict[int, set[int]] = defaultdict(set)  # node id() -> its parents' id()s
    counts: dict[tuple[int, int], int] = defaultdict(int)
    nodes_by_id: dict[int, Node] = {}
    for parent, child in links:
        source, target = node_of.get(parent), node_of.get(child)
        if source is None or target is None:
            continue
        counts[(id(source), id(target))] += 1
        parents_of[id(target)].add(id(source))
        nodes_by_id[id(source)], nodes_by_id[id(target)] = source, target
    # Order each layer by its parents' mean position, then cap it.
    for layer in sorted(by_layer):
        nodes = by_layer[layer]
        for i, node in enumerate(nodes):
            ps = [nodes_by_id[p].order for p in parents_of[id(node)]]
            node.order = sum(ps) / len(ps) if ps and layer else float(i)
        nodes.sort(key=lambda n: n.order)
        if len(nodes) > MAX_PER_LAYER:
            rest = nodes[MAX_PER_LAYER - 1 :]
            more = Node(f"{layer}:more", f"{len(rest)} more steps", layer, [m for n in rest for m in n.members], True)
            for n in rest:
                for m in n.members:
                    node_of[m.id] = more
            nodes[MAX_PER_LAYER - 1 :] = [more]
        for i, node in enumerate(nodes):
            node.order = float(i)
    if any(n.more for ns in by_layer.values() for n in ns):  # edges again, onto the "more" nodes
        counts.clear()
        for parent, child in links:
            source, target = node_of.get(parent), node_of.get(child)
            if source is not None and target is not None:
                counts[(id(source), id(target))] += 1
                nodes_by_id[id(source)], nodes_by_id[id(target)] = source, target
    tallest = max((len(ns) for ns in by_layer.values()), default=0)
    height = PAD * 2 + tallest * NODE_H + max(tallest - 1, 0) * GAP_Y
    all_nodes: list[Node] = []
    for layer, nodes in sorted(by_layer.items()):
        column = len(nodes) * NODE_H + (len(nodes) - 1) * GAP_Y
        top = (height - column) / 2
        for i, node in enumerate(nodes):
            node.x = PAD + layer * (NODE_W + GAP_X)
            node.y = top + i * (NODE_H + GAP_Y)
            node.segments = _segments(node.members)
            for seg in node.segments:  # placed inside the node
                seg.x += node.x + 10
            all_nodes.append(node)
    edges = [Edge(nodes_by_id[s], nodes_by_id[t], n) for (s, t), n in counts.items()]
    width = PAD * 2 + (max(by_layer, default=0) + 1) * NODE_W + max(by_layer, default=0) * GAP_X
    return Layout(all_nodes, edges, int(width), int(height), sum(1 for n in all_nodes if n.count > 1), layer_of)


def _segments(members: Sequence[Member]) -> list[Segment]:
    """Counts by state, in the console's order, with their place in a bar as wide as a node's inner width."""
    by_state: dict[str, int] = defaultdict(int)
    for m in members:
        by_state[m.state] += 1
    return segments(by_state, NODE_W - 20)


def segments(counts: dict[str, int], width: float) -> list[Segment]:
    """A bar of `width` split by state (the state table's order and colours); also the Workflows page's bars."""
    total = sum(counts.values())
    out: list[Segment] = []
    x = 0.0
    for state in sorted(counts, key=lambda s: (_ORDER.get(s, (9, 0)), s)):
        n = counts[state]
        if not n:
            continue
        w = width * n / total if total else 0.0
        out.append(Segment(state, n, _tone(state), _pending(state), x, w))
        x += w
    return out
