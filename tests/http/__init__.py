"""The HTTP service end to end on real uvicorn."""
