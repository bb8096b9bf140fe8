"""The framing layer of the kubelet's streaming API (exec, attach, port-forward): SPDY/3.1 and the WebSocket
channel protocols. Pure codecs: `spdy`, `negotiation`, `channel_codec`; transports: `connection`, `channels`."""
