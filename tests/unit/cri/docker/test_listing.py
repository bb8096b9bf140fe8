"""The container listing is decoded again only when it changed in what a summary reads.

The bodies are real `GET /containers/json?all=1` answers of Docker 20.10 for one pod (its sandbox and its
container), taken 4 s apart with nothing happening: they differ in the `Status` texts ("Up 40 seconds" / "Up 44
seconds") and in the order of the container's `Mounts` (a Go map's order).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cri.docker.listing import SummaryListing, without_unread_fields

FIXTURES = Path(__file__).parents[3] / "fixtures" / "docker"
EARLIER = (FIXTURES / "containers-json-one-pod.json").read_bytes()
LATER = (FIXTURES / "containers-json-one-pod-later.json").read_bytes()
UID = "b534871e6331dca30ff84adb913eccad"


def test_the_recorded_bodies_differ_only_in_status_texts() -> None:
    assert EARLIER != LATER
    assert EARLIER.replace(b"Up 40 seconds", b"Up 44 seconds").replace(b"Up 46 seconds", b"Up 49 seconds") != LATER
    assert without_unread_fields(EARLIER) == without_unread_fields(LATER)
    kept = without_unread_fields(EARLIER)
    assert b'"State":"running"' in kept and b"io.kubernetes.pod.uid" in kept
    assert b"Mounts" not in kept and b'"Status"' not in kept


def test_a_mount_holding_a_brace_is_kept_and_compared() -> None:
    odd = EARLIER.replace(b"/etc-hosts", b"/etc-{hosts}")
    assert b"/etc-{hosts}" in without_unread_fields(odd)


def test_first_body_is_decoded_into_summaries() -> None:
    listing = SummaryListing()
    summaries = listing.summaries(EARLIER)
    assert listing.decodes == 1
    assert sorted((s.is_sandbox, s.pod_uid, s.state) for s in summaries) == [(False, UID, "running"),
                                                                             (True, UID, "running")]
    container = next(s for s in summaries if not s.is_sandbox)
    assert container.id.startswith("58ecfc8b5a19")
    assert container.labels["io.kubernetes.container.name"] == "main"


def test_a_body_changed_only_in_status_texts_is_not_decoded_again() -> None:
    listing = SummaryListing()
    first = listing.summaries(EARLIER)
    again = listing.summaries(LATER)
    assert listing.decodes == 1
    assert again == first
    again.clear()  # each caller gets its own list
    assert listing.summaries(LATER) == first


def test_a_new_state_is_decoded() -> None:
    listing = SummaryListing()
    listing.summaries(EARLIER)
    exited = LATER.replace(b'"State":"running","Status":"Up 44 seconds"', b'"State":"exited","Status":"Exited (0) 1 second ago"', 1)
    assert exited != LATER
    summaries = listing.summaries(exited)
    assert listing.decodes == 2
    assert sorted(s.state for s in summaries) == ["exited", "running"]


def test_an_object_gone_or_a_label_changed_is_decoded() -> None:
    listing = SummaryListing()
    listing.summaries(EARLIER)
    assert listing.summaries(b"[]") == [] and listing.decodes == 2
    relabelled = EARLIER.replace(b'"io.kubernetes.container.name":"main"', b'"io.kubernetes.container.name":"side"')
    assert relabelled != EARLIER
    summaries = listing.summaries(relabelled)
    assert listing.decodes == 3
    assert {s.labels.get("io.kubernetes.container.name") for s in summaries} == {"side", "POD"}


def test_a_body_that_is_not_a_list_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a list"):
        SummaryListing().summaries(b'{"message":"oops"}')
