"""The HTTP routes, one module per resource; each module builds an ``APIRouter`` over a store."""
