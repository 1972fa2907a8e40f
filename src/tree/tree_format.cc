#include "tree/tree_format.h"
