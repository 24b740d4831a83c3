"""Collection order of the recorder tests.

The few tests that build the package (a wheel, a fresh clone's install; about
four minutes of CPU together, on one Python each) go first: under
pytest-xdist each then starts on a worker of its own while the other workers
share the rest of the suite, instead of the builds coming last (by file name)
with the other workers idle.  Nothing else depends on the order.
"""

BUILDS = (
    "test_wheel.py::",
    "test_readme_commands.py::",
    "test_packaging.py::test_pip_wheel_has_the_extension_and_the_cli",
)


def pytest_collection_modifyitems(session, config, items):
    first = [item for item in items if any(b in item.nodeid for b in BUILDS)]
    if first:
        rest = [item for item in items if item not in first]
        items[:] = first + rest
