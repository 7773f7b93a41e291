"""Protocol emulators of cluster platforms that cannot run on our machines (see the README's platform table).

Each is a package runnable on its own (``python -m tests.emulators.<platform>``) and driven in tests by the
platform's real client library over real HTTP.
"""
