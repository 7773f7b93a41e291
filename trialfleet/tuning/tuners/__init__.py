"""The built-in tuners, one module each (the catalog names them; each is imported when a config uses it)."""
