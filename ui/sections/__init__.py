"""The control panel's pages, one module each; every module has `render(client)`."""
