"""Response and request schemas of the panel routes, one module per resource."""
