"""Live views of Kafka topics, for the panel: consumer threads (`live.consumers`) follow the
topics and fill pure in-memory views (`live.views`, no Kafka) that the panel's routes read.
Imports only `core`: the HTTP code in `api/panel/` reads these, never the other way."""
