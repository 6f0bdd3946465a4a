// GCC 12 at -O1 with sanitizers reports -Wmismatched-new-delete on Asio coroutine frames (it
// sees awaitable_frame_base's operator delete but not the recycling allocator's operator new): a
// false positive, as in src/sim/server.cpp. A router file that defines coroutines includes this
// header; the suppression holds from there to the end of that file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
