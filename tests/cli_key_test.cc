// cairn key: integration tests (filled in with the key commands).
#include <gtest/gtest.h>
