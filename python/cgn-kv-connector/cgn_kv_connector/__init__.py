"""cgn-kv-connector: vLLM's KV connector v1 over Cognitora's node-local block store (preview).

cgn_kv_connector.client     KvCachedClient, the gRPC client of cgn-kvcached
cgn_kv_connector.connector  CognitoraConnector, loaded by vLLM through kv_connector_module_path

docs/kv-connector.md in the Cognitora repository describes both.
"""

__version__ = "0.1.0"
