#include "core/id_map.h"

#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rbmrec {
namespace {

using ::testing::ElementsAre;

TEST(IdMapTest, EmptyMap) {
  const IdMap map;
  EXPECT_EQ(map.size(), 0);
  EXPECT_EQ(map.Find("a"), -1);
  EXPECT_TRUE(map.names().empty());
}

TEST(IdMapTest, AssignsIndicesInOrderOfFirstAppearance) {
  IdMap map;
  EXPECT_EQ(map.GetOrAdd("u7"), 0);
  EXPECT_EQ(map.GetOrAdd("u3"), 1);
  EXPECT_EQ(map.GetOrAdd("u7"), 0);
  EXPECT_EQ(map.GetOrAdd("u10"), 2);
  EXPECT_EQ(map.GetOrAdd("u3"), 1);
  EXPECT_EQ(map.size(), 3);
  EXPECT_THAT(map.names(), ElementsAre("u7", "u3", "u10"));
  EXPECT_EQ(map.Name(0), "u7");
  EXPECT_EQ(map.Name(2), "u10");
}

TEST(IdMapTest, FindDoesNotAdd) {
  IdMap map;
  map.GetOrAdd("x");
  EXPECT_EQ(map.Find("x"), 0);
  EXPECT_EQ(map.Find("y"), -1);
  EXPECT_EQ(map.size(), 1);
}

TEST(IdMapTest, AcceptsViewsThatAreNotNulTerminated) {
  IdMap map;
  const std::string line = "12\t34";
  const std::string_view view(line);
  EXPECT_EQ(map.GetOrAdd(view.substr(0, 2)), 0);
  EXPECT_EQ(map.GetOrAdd(view.substr(3, 2)), 1);
  EXPECT_EQ(map.Find("12"), 0);
  EXPECT_EQ(map.Find("34"), 1);
  EXPECT_EQ(map.Find(view.substr(0, 1)), -1);
}

TEST(IdMapTest, IdsAreCaseAndByteExact) {
  IdMap map;
  EXPECT_EQ(map.GetOrAdd("Item"), 0);
  EXPECT_EQ(map.GetOrAdd("item"), 1);
  EXPECT_EQ(map.GetOrAdd("item "), 2);
  EXPECT_EQ(map.GetOrAdd(std::string_view("a\0b", 3)), 3);
  EXPECT_EQ(map.Find(std::string_view("a\0b", 3)), 3);
  EXPECT_EQ(map.Find("a"), -1);
}

TEST(IdMapTest, ManyIdsStayConsistent) {
  IdMap map;
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(map.GetOrAdd("id" + std::to_string(i)), i);
  }
  for (int i = 0; i < 20000; ++i) {
    const std::string id = "id" + std::to_string(i);
    ASSERT_EQ(map.Find(id), i);
    ASSERT_EQ(map.Name(i), id);
  }
  EXPECT_EQ(map.size(), 20000);
}

TEST(IdMapTest, EqualityComparesNamesInOrder) {
  IdMap a;
  IdMap b;
  EXPECT_TRUE(a == b);
  a.GetOrAdd("x");
  a.GetOrAdd("y");
  b.GetOrAdd("y");
  b.GetOrAdd("x");
  EXPECT_FALSE(a == b);
  IdMap c;
  c.GetOrAdd("x");
  c.GetOrAdd("y");
  c.GetOrAdd("x");
  EXPECT_TRUE(a == c);
}

TEST(IdMapTest, CopiesAreIndependent) {
  IdMap a;
  a.GetOrAdd("x");
  IdMap b = a;
  b.GetOrAdd("y");
  EXPECT_EQ(a.size(), 1);
  EXPECT_EQ(a.Find("y"), -1);
  EXPECT_EQ(b.Find("y"), 1);
  EXPECT_EQ(b.Find("x"), 0);
}

}  // namespace
}  // namespace rbmrec
