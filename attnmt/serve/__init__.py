"""attnmt-serve: a trained model behind HTTP (FastAPI), with dynamic batching and a web page."""
