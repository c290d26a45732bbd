"""`attnmt serve`: trained runs behind a JSON API and a page that shows their attention.

- `schemas`: the API's request and response bodies, and the server's limits;
- `catalog`: the runs served, loaded once, and how their results become JSON;
- `batcher`: requests arriving together are decoded together (dynamic batching);
- `state`: one server's state (runs, limits, metrics, batcher), which every route receives;
- `routes`: the API's routes, on one router;
- `app`: the FastAPI application assembled: the router, the middleware that counts and
  size-limits requests, and the handlers that answer every refusal in one JSON shape;
- `server`: binding the port and running uvicorn, for the command line.

The page is plain HTML, CSS and JavaScript under `static/` (with the views it shares with the
exported web page, `attnmt.views`, under `/shared/`): no build step, nothing from a CDN.
"""
