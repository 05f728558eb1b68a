"""The API's routes by concern, each an APIRouter that `api.app.create_app` includes."""
