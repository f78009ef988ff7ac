"""The HTTP face of placement (FastAPI). The library never imports it; it imports the library.

`create_app(settings)` builds the app; `run(host, port, workers)` serves it under uvicorn.
"""

from service.app import create_app
from service.server import run
from service.settings import Settings

__all__ = ["Settings", "create_app", "run"]
