#include "core/http/proxy_headers.h"

#include <gtest/gtest.h>

namespace cgn::http {
namespace {

Fields client_request() {
  Fields in;
  in.set(Field::content_type, "application/json");
  in.set(Field::accept, "text/event-stream");
  in.set(Field::user_agent, "openai-python/1.0");
  in.set("OpenAI-Organization", "org-1");
  in.set("OpenAI-Project", "proj-1");
  in.set("OpenAI-Beta", "assistants=v2");
  in.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  in.set("tracestate", "vendor=1");
  in.set(Field::authorization, "Bearer sk-secret");
  in.set("X-Sim-Fault", "exit");
  in.set("X-Forwarded-For", "6.6.6.6");
  in.set(Field::cookie, "a=b");
  in.set("X-CGN-Role", "prefill");
  in.set("X-Request-Id", "client-id");
  in.set(Field::host, "router");
  in.set(Field::content_length, "2");
  in.set("Keep-Alive", "timeout=5");
  return in;
}

TEST(ProxyHeaders, only_the_allow_listed_client_headers_are_copied) {
  Fields out;
  copy_client_headers(client_request(), out);
  std::vector<std::string> names;
  for (const auto& f : out) {
    names.emplace_back(f.name_string());
  }
  EXPECT_EQ(names.size(), 8u);
  for (std::string_view allowed : kClientHeaders) {
    EXPECT_NE(out.find(allowed), out.end()) << allowed;
  }
  for (const char* dropped :
       {"Authorization", "X-Sim-Fault", "X-Forwarded-For", "Cookie", "X-CGN-Role", "X-Request-Id", "Host"}) {
    EXPECT_EQ(out.find(dropped), out.end()) << dropped;
  }
}

TEST(ProxyHeaders, headers_named_in_connection_are_not_forwarded_even_when_allow_listed) {
  Fields in = client_request();
  in.set(Field::connection, "keep-alive, User-Agent ,traceparent");
  Fields out;
  copy_client_headers(in, out);
  EXPECT_EQ(out.find(Field::user_agent), out.end());
  EXPECT_EQ(out.find("traceparent"), out.end());
  EXPECT_NE(out.find("tracestate"), out.end());
  Fields agent_out;
  copy_forwarded_headers(in, agent_out);
  EXPECT_EQ(agent_out.find(Field::user_agent), agent_out.end());
}

TEST(ProxyHeaders, the_agent_hop_keeps_cognitora_headers_and_the_allow_list) {
  Fields out;
  copy_forwarded_headers(client_request(), out);
  EXPECT_EQ(out["X-CGN-Role"], "prefill");
  EXPECT_EQ(out["X-Request-Id"], "client-id");
  EXPECT_EQ(out["X-Forwarded-For"], "6.6.6.6");
  EXPECT_EQ(out[Field::content_type], "application/json");
  EXPECT_EQ(out.find("X-Sim-Fault"), out.end());
  EXPECT_EQ(out.find(Field::authorization), out.end());
  EXPECT_EQ(out.find(Field::cookie), out.end());
}

TEST(ProxyHeaders, responses_lose_hop_by_hop_fields_and_on_request_the_cognitora_ones) {
  Fields in;
  in.set(Field::content_type, "application/json");
  in.set(Field::connection, "close, X-Secret-Hop");
  in.set("X-Secret-Hop", "1");
  in.set(Field::transfer_encoding, "chunked");
  in.set("X-Request-Id", "engine-id");
  in.set("X-CGN-Node", "n1");
  in.set("X-Sim-Ttft-Ms", "12");
  Fields relayed;
  copy_response_headers(in, relayed);
  EXPECT_EQ(relayed[Field::content_type], "application/json");
  EXPECT_EQ(relayed["X-Sim-Ttft-Ms"], "12");
  EXPECT_EQ(relayed["X-Request-Id"], "engine-id");
  EXPECT_EQ(relayed.find("X-Secret-Hop"), relayed.end());
  EXPECT_EQ(relayed.find(Field::connection), relayed.end());
  EXPECT_EQ(relayed.find(Field::transfer_encoding), relayed.end());
  Fields to_client;
  copy_response_headers(in, to_client, /*drop_cognitora=*/true);
  EXPECT_EQ(to_client.find("X-Request-Id"), to_client.end());
  EXPECT_EQ(to_client.find("X-CGN-Node"), to_client.end());
  EXPECT_EQ(to_client["X-Sim-Ttft-Ms"], "12");
}

TEST(ProxyHeaders, peer_address_drops_the_port) {
  EXPECT_EQ(peer_address("10.0.0.7:51234"), "10.0.0.7");
  EXPECT_EQ(peer_address("::1:51234"), "::1");
  EXPECT_EQ(peer_address("10.0.0.7"), "10.0.0.7");
  EXPECT_EQ(peer_address(""), "");
}

TEST(ProxyHeaders, x_forwarded_for_is_the_peer_address_never_the_clients_value) {
  Fields out;
  out.set("X-Forwarded-For", "6.6.6.6");
  set_forwarded_for(out, "10.1.2.3:45678");
  EXPECT_EQ(out["X-Forwarded-For"], "10.1.2.3");
  set_forwarded_for(out, "::1:80");
  EXPECT_EQ(out["X-Forwarded-For"], "::1");
  set_forwarded_for(out, "");
  EXPECT_EQ(out.find("X-Forwarded-For"), out.end());
}

}  // namespace
}  // namespace cgn::http
