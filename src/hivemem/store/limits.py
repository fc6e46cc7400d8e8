"""The store-side settings a verb needs, passed in (the store never reads config itself)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    """Bounds and periods from config (docs/operations.md)."""

    max_content_bytes: int = 65536
    max_versions: int = 20
    tombstone_days: int = 30
    review_days: dict[str, int] = field(default_factory=lambda: {"decision": 180, "task": 7})
    recall_prompt_limit: int = 8
    recall_session_limit: int = 12
    recall_record_chars: int = 1000
    recall_total_chars: int = 6000
    backups_keep: int = 5
    recall_min_similarity: float = 0.3
    search_min_similarity: float = 0.0
    vector_weight: float = 1.0
    import_max_bytes: int = 256 << 20
    # The space patterns of a team store mounted beside this one (team.spaces when team.url is set): those spaces
    # live there, so this store takes none of them in (docs/team.md); empty for a store with nothing beside it.
    elsewhere: tuple[str, ...] = ()
