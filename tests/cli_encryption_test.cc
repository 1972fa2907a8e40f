// Encrypted backups end to end.
#include <gtest/gtest.h>
