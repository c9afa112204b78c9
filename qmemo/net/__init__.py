"""The node's HTTP side: the aiohttp app factory, handlers (decode -> call the node ->
encode), the wire formats (`wire`: binary batches and every JSON answer), the peer
client and the Prometheus page. No chain rules here."""
