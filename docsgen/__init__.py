"""The docs site's generated pages (``mkdocs.yml`` runs :mod:`docsgen.hooks` at every build): the config
reference from the pydantic models and the CLI reference from the typer commands, so neither can go stale."""
