"""What ``trialfleet trial ls`` loads beyond what it uses: the CLI's start-up is most of its time at any number
of trials. The optimize mode is read without the tuning package's contracts, factory and search-space checks,
and a plain-HTTP manager is reached without loading the CA bundle (no TLS is spoken to it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(script: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_the_optimize_mode_is_read_without_the_tuners_machinery() -> None:
    out = run(
        """
        import sys
        from trialfleet.tuning.catalog import configured_optimize_mode
        print(configured_optimize_mode({"tuner": {"name": "TPE", "classArgs": {"optimize_mode": "minimize"}}}))
        print(sorted(m for m in sys.modules if m.startswith("trialfleet.tuning.")))
        """
    )
    # tuning.moved (the old module names' finder, stdlib only) is installed with the package
    assert out.splitlines() == ["minimize", "['trialfleet.tuning.catalog', 'trialfleet.tuning.moved']"]


def test_the_tuning_package_still_offers_every_public_name() -> None:
    out = run(
        """
        import trialfleet.tuning as tuning
        from trialfleet.tuning import Tuner, create_tuner
        from trialfleet.tuning.base import Tuner as Base
        print(Tuner is Base, all(hasattr(tuning, name) for name in tuning.__all__))
        try:
            tuning.nothing
        except AttributeError as exc:
            print(exc)
        """
    )
    assert out.splitlines() == ["True True", "module 'trialfleet.tuning' has no attribute 'nothing'"]


def test_a_plain_http_manager_is_reached_without_loading_certificates() -> None:
    out = run(
        """
        import ssl
        loads = []
        real = ssl.SSLContext.load_verify_locations
        def counted(self, *args, **kwargs):
            loads.append(args or kwargs)
            return real(self, *args, **kwargs)
        ssl.SSLContext.load_verify_locations = counted
        from trialfleet.client import RestClient
        RestClient("http://127.0.0.1:1").close()
        plain = len(loads)
        RestClient("https://127.0.0.1:1").close()
        print(plain, len(loads) > plain)
        """
    )
    assert out == "0 True"
