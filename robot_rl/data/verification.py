"""What is wrong with a stored episode, and an episode's identity wherever it was copied: :func:`verify` reads every
chunk (their checksums) and compares the lengths and the content hash an episode was recorded with; :func:`check`
raises on the first problems; :func:`episode_uid` names an episode (its ``uid``, or a hash of its content)."""

from __future__ import annotations

from .episode_store import STEP_FIELDS, ContentHash, EpisodeStore, EpisodeStoreError, stored_arrays


def verify_episode(store: EpisodeStore, name: str) -> list[str]:
    """What is wrong with one episode, one line each (empty when it is sound): unreadable
    metadata or chunks, missing fields, lengths that disagree with ``length`` (observations
    T + 1, step fields T, a stream's data and timestamps alike), a content checksum that
    differs from the recorded one (episodes written before checksums have none to compare)."""
    where = f"episode {name}"
    try:
        group = store._group(name)
        attrs, arrays = dict(group.attrs), dict(stored_arrays(group))
    except Exception as error:  # noqa: BLE001 - unreadable zarr.json, of the episode or of an array
        return [f"{where}: unreadable metadata ({one_line(error)})"]
    problems = []
    length = attrs.get("length")
    if type(length) is not int or length < 1:
        problems.append(f"{where}: length={length!r}; expected a positive integer")
    missing = sorted(({f"obs/{key}" for key in store.observation_shapes} | set(STEP_FIELDS)) - set(arrays))
    if missing:
        problems.append(f"{where}: missing field(s) {', '.join(missing)}")
    content = ContentHash()
    stream_lengths: dict[str, set[int]] = {}
    for field, array in sorted(arrays.items()):
        try:
            data = store.read_field(name, field, array)
        except EpisodeStoreError as error:
            problems.append(one_line(error).removeprefix(f"{store.path}: "))
            continue
        if data.ndim == 0:
            problems.append(f"{where}, field {field}: a scalar; expected an array of rows")
            continue
        content.add(field, data)
        if field.startswith("streams/"):
            stream_lengths.setdefault(field.split("/")[1], set()).add(len(data))
            continue
        expected = length + 1 if field.startswith("obs/") else length
        if type(length) is int and len(data) != expected:
            problems.append(
                f"{where}, field {field}: {len(data)} rows; expected {expected} "
                f"(length {length}{' + 1' if field.startswith('obs/') else ''})"
            )
        shape = store.observation_shapes.get(field.removeprefix("obs/")) if field.startswith("obs/") else None
        if shape is not None and data.shape[1:] != shape:
            problems.append(f"{where}, field {field}: frame shape {data.shape[1:]}; the store's {shape}")
    for stream, lengths in stream_lengths.items():
        if len(lengths) > 1:
            problems.append(f"{where}, stream {stream}: data and timestamp lengths {sorted(lengths)} differ")
    recorded, found = attrs.get("checksum"), content.hexdigest()
    if recorded is not None and not problems and found != recorded:
        problems.append(f"{where}: content checksum {found[:16]}... differs from the recorded {str(recorded)[:16]}...")
    return problems


def verify(store: EpisodeStore) -> list[str]:
    """What is wrong with the store's episodes, one line each (:func:`verify_episode`); empty when all are sound."""
    return [problem for name in store.episode_names() for problem in verify_episode(store, name)]


def check(*stores: EpisodeStore) -> None:
    """Verify every episode of every store; if :func:`verify` finds anything, raise EpisodeStoreError
    naming the store(s) and bad episodes (the first three problems and how many more)."""
    problems = [f"{store.path}: {problem}" for store in stores for problem in verify(store)]
    if problems:
        more = f"; and {len(problems) - 3} more problem(s)" if len(problems) > 3 else ""
        raise EpisodeStoreError(f"failed verification: {'; '.join(problems[:3])}{more}")


def episode_uid(store: EpisodeStore, name: str) -> str:
    """The episode's ``uid``; for one written before uids, ``content-`` and the sha256 of its arrays
    (:class:`ContentHash`), the same wherever the episode was copied to."""
    uid = store.episode_attrs(name).get("uid")
    if isinstance(uid, str):
        return uid
    content = ContentHash()
    for field, array in stored_arrays(store._group(name)):
        content.add(field, store.read_field(name, field, array))
    return "content-" + content.hexdigest()


def one_line(error: Exception) -> str:
    """An error's message on one line."""
    return " ".join(str(error).split())
