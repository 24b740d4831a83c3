"""The one-attach-per-target lock (threadgraph/_attach.py lock_state): a
lock taken on a state file its holder unlinked in the meantime is not kept."""

import fcntl
import os

import pytest

from threadgraph import _attach


@pytest.fixture
def state_in(tmp_path, monkeypatch):
    monkeypatch.setattr(_attach.tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_second_attach_is_refused_naming_the_holder(state_in):
    fd = _attach.lock_state(4242)
    try:
        with pytest.raises(_attach.Refused, match=r"already attached .*pid %d\)" % os.getpid()):
            _attach.lock_state(4242)
    finally:
        os.close(fd)


def test_lock_on_a_file_unlinked_before_the_flock_is_not_kept(state_in, monkeypatch):
    # The interleaving of three attaches: this one opens the state file, the
    # holder unlinks it and lets go (detach), and only then this one's flock
    # runs.  Its lock is then on a file no path names, beside which a third
    # attach would create and lock a new one: both would go on.
    path = _attach.state_path(4242)
    real_flock = fcntl.flock
    unlinked = []

    def flock_after_the_holders_unlink(fd, op):
        if not unlinked:
            os.unlink(path)
            unlinked.append(fd)
        return real_flock(fd, op)

    monkeypatch.setattr(_attach.fcntl, "flock", flock_after_the_holders_unlink)
    fd = _attach.lock_state(4242)
    try:
        assert unlinked
        assert os.path.samestat(os.fstat(fd), os.stat(path))
        with open(path) as f:
            assert f.read() == "%d\n" % os.getpid()
        monkeypatch.setattr(_attach.fcntl, "flock", real_flock)
        with pytest.raises(_attach.Refused):
            _attach.lock_state(4242)
    finally:
        os.close(fd)
