"""The node's HTTP side: the aiohttp app factory, handlers (decode -> call the node ->
encode), the wire formats (`wire`: binary batches and every JSON answer), the peer
client and the Prometheus page; and `client`, the one client of the node's API that
every tool asks through (its answers: qmemo.api_schema). No chain rules here."""
