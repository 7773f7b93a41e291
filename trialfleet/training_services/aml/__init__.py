"""The ``aml`` platform's config (accepted so NNI configs load; refused at start until its service lands)."""
