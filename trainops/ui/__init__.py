"""The read-only registry browser: a SQLite index of registries and an ASGI app over it.

`trainops ui` serves it; `trainops.ui.server.prepare` + `serve` are the library entry
points; `trainops.ui.app.create_app` builds the app for any ASGI server.
"""
