"""Adapters to the outside world, one small module each: object storage (aioboto3),
metadata (asyncpg), vectors (pymilvus), inference (ONNX Runtime / tritonclient)."""
