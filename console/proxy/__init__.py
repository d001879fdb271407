"""Proxy mode: ``/proxy/v1`` is an OpenAI-compatible endpoint, so a runtime gets compression and auditing by
changing its ``base_url``. ``views`` is the HTTP side (auth, relaying, streaming), ``relay`` the upstream
client and the stream's assembly, ``console.services.proxy`` the bookkeeping (matching, compressing, recording).
"""
