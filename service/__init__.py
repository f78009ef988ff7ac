"""The HTTP face of placement (FastAPI). The library never imports it; it imports the library.

`create_app(settings)` builds the app; `run(host, port, workers)` serves it under uvicorn.
"""

from placement_service.app import create_app
from placement_service.server import run
from placement_service.settings import Settings

__all__ = ["Settings", "create_app", "run"]
