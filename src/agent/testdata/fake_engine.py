#!/usr/bin/env python3
"""A fake inference engine for the supervisor's integration tests.

Started through wrapper scripts named like the real engines ("vllm", "llama-server"), it takes
the port from --port wherever it appears and behaves like that engine while loading:
  vllm         the port stays closed until the file named by FAKE_ENGINE_LOADED exists
  llama-server GET /health answers 503 {"error":{..."Loading model"...}} until then
Control endpoints: GET /exit?code=N exits, /fail makes /health answer 503, /recover undoes it.
GET /metrics serves the body of the file named by FAKE_ENGINE_METRICS (if set).
"""
import http.server
import os
import sys
import threading
import time

flavour = os.path.basename(os.environ.get("FAKE_ENGINE_FLAVOUR", "vllm"))
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
loaded_file = os.environ.get("FAKE_ENGINE_LOADED", "")
metrics_file = os.environ.get("FAKE_ENGINE_METRICS", "")
state = {"failing": False}


def loaded():
    return not loaded_file or os.path.exists(loaded_file)


print(f"fake {flavour} engine args={' '.join(args)}", flush=True)
print(f"env CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')} "
      f"HIP_VISIBLE_DEVICES={os.environ.get('HIP_VISIBLE_DEVICES', '')}", flush=True)
print("this line goes to stderr", file=sys.stderr, flush=True)

if flavour == "vllm":
    # vLLM opens its HTTP port only once the model is loaded. The wait is bounded so a test
    # that never creates the file cannot leave this process behind.
    for _ in range(6000):
        if loaded():
            break
        time.sleep(0.01)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            if state["failing"]:
                self.reply(503, "")
            elif not loaded():
                self.reply(503, '{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}')
            else:
                self.reply(200, '{"status":"ok"}')
        elif self.path.startswith("/exit"):
            code = int(self.path.split("code=")[1]) if "code=" in self.path else 0
            self.reply(200, "bye")
            self.wfile.flush()
            print(f"exiting with {code}", flush=True)
            os._exit(code)
        elif self.path == "/fail":
            state["failing"] = True
            self.reply(200, "")
        elif self.path == "/recover":
            state["failing"] = False
            self.reply(200, "")
        elif self.path == "/metrics" and metrics_file:
            with open(metrics_file) as f:
                self.reply(200, f.read(), "text/plain; version=0.0.4")
        else:
            self.reply(404, "{}")

    def log_message(self, fmt, *a):
        print("request " + (fmt % a), flush=True)


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
print(f"listening on {port}", flush=True)
server.serve_forever()
