"""``algo register|unregister|list|show``: custom tuners and assessors registered by name."""

from __future__ import annotations

from pathlib import Path

import typer

from trialfleet.cli.output import print_json, print_table, success

app = typer.Typer(help="Register custom tuners and assessors by name.", no_args_is_help=True)


@app.command("register")
def register(
    meta_path: Path = typer.Option(..., "--meta_path", "-m", help="the algorithm's meta YAML"),
) -> None:
    """Register the algorithm(s) a meta file describes (algoType, builtinName, className …)."""
    from trialfleet.tuning import user_algorithms

    for name in user_algorithms.register(meta_path):
        success(f"Registered {name}.")


@app.command("unregister")
def unregister(name: str = typer.Argument(..., help="the registered name")) -> None:
    """Forget a registered algorithm."""
    from trialfleet.tuning import user_algorithms

    user_algorithms.unregister(name)
    success(f"Unregistered {name}.")


@app.command("list")
def list_algorithms(as_json: bool = typer.Option(False, "--json", help="JSON instead of a table")) -> None:
    """Built-in and registered algorithms."""
    from dataclasses import asdict

    from trialfleet.tuning import user_algorithms

    infos = user_algorithms.list_algorithms()
    if as_json:
        print_json([asdict(i) for i in infos])
        return
    rows = [(i.name, i.kind, i.source, i.class_name, i.module) for i in infos]
    print_table(None, ["Name", "Type", "source", "Class Name", "Module Name"], rows)


@app.command("show")
def show(name: str = typer.Argument(..., help="a built-in or registered name")) -> None:
    """Everything known about one algorithm."""
    from trialfleet.tuning import user_algorithms

    print_json(user_algorithms.show(name))


# nnictl's short aliases
app.command("reg", hidden=True)(register)
app.command("unreg", hidden=True)(unregister)
