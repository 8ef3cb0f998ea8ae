"""The chat over the wire: REST and SSE routes, the websocket consumer and its routing. Each makes one service call."""
